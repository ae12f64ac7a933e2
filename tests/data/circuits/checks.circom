pragma circom 2.0.0;

// Witness-calculator checks (no key): a 2x2 input array, a log() line and an assert.
template Checks() {
    signal input a[2][2];
    signal input b;
    signal output c;
    log("a00", a[0][0], "b", b);
    assert(b != 7);
    c <== a[0][0] * a[1][1] + b;
}

component main = Checks();

pragma circom 2.0.0;

// A witness that takes as long as its input says: n rounds of a loop (no constraint inside), for
// the native generator's time-limit and crash tests.
template Spin() {
    signal input n;
    signal output out;
    var acc = 0;
    for (var i = 0; i < n; i++) {
        acc = acc * 3 + i;
    }
    out <-- acc;
    out * 0 === 0;
}

component main = Spin();

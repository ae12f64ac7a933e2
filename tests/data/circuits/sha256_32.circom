pragma circom 2.0.0;
include "circomlib/circuits/sha256/sha256.circom";

// SHA-256 of a 32-byte message given as 256 bits, most significant bit of each byte first.
component main = Sha256(256);

"""Witness generators: circom's native C++ generators (:mod:`~distprove.witness.native`)."""

"""Backend-independent prover stages: coefficient CSR (gather), MSM windows (msm), assembly."""

"""The eval: lm-eval's requests answered by the engine, stage by stage."""

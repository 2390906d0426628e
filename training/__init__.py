"""DGX side: PPO on Ray, RLHF for instructions, retraining from field logs; and the `sim2real` command line."""

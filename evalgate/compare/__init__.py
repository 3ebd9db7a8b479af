"""`evalgate compare`: did a change cost accuracy? Two runs paired question by question."""

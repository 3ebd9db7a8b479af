"""`evalgate verify`: the CI gate over a whole sweep's artifacts."""

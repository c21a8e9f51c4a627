"""The soak run (`make soak`): kills, restarts and load against a private stack."""

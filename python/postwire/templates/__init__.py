"""Templates and their variables; the placeholder rendering broadcasts share."""

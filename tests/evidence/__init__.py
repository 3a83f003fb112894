"""Evidence per citation: verdicts, judges, the surfaces that show them, the labelled pairs."""

"""Questions in other languages: detection, fixed texts and answers in the asker's language."""

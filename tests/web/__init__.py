"""The reference web client in Node and in a real Chromium."""

"""The whole pipeline: for real over the sample, as a LangChain Runnable, in a conversation, under
LangChain's standard suites."""

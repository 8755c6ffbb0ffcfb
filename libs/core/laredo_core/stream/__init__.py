"""The internal change stream: subjects, message ids, headers and the batch codec."""

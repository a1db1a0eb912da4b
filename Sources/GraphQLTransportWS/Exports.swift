import GQLMuxVocabulary
// The JSON scanner and envelope are shared with the local protocol; modules that speak the
// upstream protocol see them through this one.
@_exported import JSONEnvelope

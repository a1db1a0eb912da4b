import GQLMuxFuzz

// libFuzzer entry point for the local GraphQL endpoint's translators; built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEndpoint(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.endpoint(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

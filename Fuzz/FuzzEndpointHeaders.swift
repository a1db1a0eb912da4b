import GQLMuxFuzz

// libFuzzer entry point for the endpoint's request checks (Host, Origin, Sec-Fetch-Site, the
// token, media types); built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEndpointHeaders(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.endpointHeaders(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

import GQLMuxFuzz

// libFuzzer entry point for the local socket's input path; built by scripts/fuzz.sh.
/// libFuzzer's entry point for this target.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzLocalLines(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzTargets.localLines(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}

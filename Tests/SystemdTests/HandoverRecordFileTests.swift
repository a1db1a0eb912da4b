import SystemdSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The memory file the online restart stores its record in: sealed before it is stored, so no
/// process that holds it can change the record as the next one reads it; an unsealed one is
/// refused, except a record of a build that did not seal them.
@Suite struct HandoverRecordFileTests {
    @Test func theRecordIsSealedAgainstWritesAndResizesAndAnUnsealedOneIsRefused() throws {
        let record = Array("{\"version\":1}".utf8)
        let fd = try FileDescriptorStore.memoryFile(record, name: "gqlmux-test-record")
        defer { close(fd) }
        #expect(try FileDescriptorStore.contents(of: fd) == record)
        // Every way to change it fails with EPERM, the seals' answer.
        let byte: [UInt8] = [0x41]
        #expect(pwrite(fd, byte, 1, 0) == -1 && errno == EPERM)
        #expect(ftruncate(fd, 2) == -1 && errno == EPERM)
        #expect(ftruncate(fd, 64) == -1 && errno == EPERM)
        #expect(try FileDescriptorStore.contents(of: fd) == record)

        // A record stored by gqlmuxd before it sealed them (a memory file that cannot be sealed)
        // is read, so an upgrade from such a build closes no client.
        let older = FileDescriptorStore.unsealableMemoryFile(record)
        defer { close(older) }
        #expect(try FileDescriptorStore.contents(of: older) == record)

        // A memory file that could be sealed and is not: anyone holding it could change it as
        // it is read. Refused.
        let unsealed = FileDescriptorStore.unsealedMemoryFile(record)
        defer { close(unsealed) }
        #expect(throws: FileDescriptorStore.Failure.self) { try FileDescriptorStore.contents(of: unsealed) }
    }
}

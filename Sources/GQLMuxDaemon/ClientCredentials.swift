import GQLMuxVocabulary
import RequestValidation

/// What one client presents for upstreams with `identity = "client"`, and the identity lanes
/// it holds: kept only within `[limits] max_credential_bytes` and the memory budget, one
/// credential at a time. Its methods say which lanes the client lets go of; its session tells
/// the control plane.
///
/// Not `Sendable`: its session's, on the daemon's loop.
struct ClientCredentials {
    /// What the client presents: a line client's `connection_init` `payload.upstream`; an
    /// endpoint client's WebSocket `connection_init` payload and its request headers.
    private(set) var presented = PresentedCredential()
    /// Why the credential it last presented is not kept (over `max_credential_bytes`, or the
    /// memory budget): each subscribe that would need it is refused with this.
    private(set) var refusal: String?
    /// The identity lanes it may use (held in the registry until it leaves).
    private(set) var heldLanes: Set<LaneID> = []
    /// What it presented when it was given each lane of an `identity = "client"` upstream it
    /// holds: a restart makes each subscription's lane again with it, so a subscription keeps
    /// its identity when the client has presented another since.
    private(set) var presentedForLane: [LaneID: PresentedCredential] = [:]
    /// Bytes of those that are not ``presented`` (kept only for the lanes still held), counted
    /// in the memory budget beside it.
    private var earlierBytes = 0

    /// Records that the client uses lane `lane`, given it while presenting `presented` (nil: a
    /// lane that credential does not pick); true the first time.
    mutating func hold(_ lane: LaneID, presented: PresentedCredential?) -> Bool {
        if let presented, presentedForLane[lane] == nil { presentedForLane[lane] = presented }
        return heldLanes.insert(lane).inserted
    }

    /// Replaces what the client presents: kept only when `limit` is set (some upstream has
    /// `identity = "client"`), only up to it, and only if `budget` holds it. Returns the held
    /// lanes none of `inUse` (its open operations' lanes) needs any more, let go of here.
    mutating func present(_ credential: PresentedCredential, limit: Int?, budget: MemoryBudget, inUse: () -> Set<LaneID>) -> [LaneID] {
        budget.credentialsChanged(by: -presented.byteCount)
        presented = PresentedCredential()
        refusal = nil
        if let limit, !credential.isEmpty {
            let size = credential.byteCount
            if size > limit {
                refusal = "the credential presented (\(size) bytes) is over [limits] max_credential_bytes (\(limit))"
            } else if !budget.credentialsChanged(by: size) {
                refusal = "the daemon's memory budget (total_buffer_bytes) cannot hold the credential presented now; try again later"
            } else {
                presented = credential
            }
        }
        return releaseUnused(inUse: inUse, budget: budget)
    }

    /// A refusal kept from before (a restart presents the record's credentials again, then the
    /// latest, which was refused then).
    mutating func keepRefusal(_ refusal: String) {
        self.refusal = refusal
    }

    /// Lets go of every held lane none of `inUse` needs; returns them.
    mutating func releaseUnused(inUse: () -> Set<LaneID>, budget: MemoryBudget) -> [LaneID] {
        var released: [LaneID] = []
        if !heldLanes.isEmpty {
            let used = inUse()
            for lane in heldLanes where !used.contains(lane) {
                heldLanes.remove(lane)
                presentedForLane[lane] = nil
                released.append(lane)
            }
        }
        countEarlier(budget)
        return released
    }

    /// Lets go of everything (the client leaves, or is refused at adoption); returns the lanes.
    mutating func releaseAll(budget: MemoryBudget) -> [LaneID] {
        budget.credentialsChanged(by: -presented.byteCount)
        presented = PresentedCredential()
        let released = Array(heldLanes)
        heldLanes = []
        presentedForLane = [:]
        countEarlier(budget)
        return released
    }

    /// Counts in the budget the credentials kept for held lanes that are not ``presented``.
    /// They are kept whatever the budget says: operations open on their lanes depend on them.
    private mutating func countEarlier(_ budget: MemoryBudget) {
        var seen: [PresentedCredential] = []
        var bytes = 0
        for credential in presentedForLane.values where credential != presented && !seen.contains(credential) {
            seen.append(credential)
            bytes += credential.byteCount
        }
        _ = budget.credentialsChanged(by: bytes - earlierBytes, whatever: true)
        earlierBytes = bytes
    }
}

/// What the clients' unwritten bytes may take, as the fan-out and the writers see it: told of
/// each change in the bytes they hand to NIO (a flush, a message written at once), never asked.
/// The daemon's memory budget is one.
package protocol OutboundBudget: AnyObject {
    /// The bytes handed to NIO and not yet written changed by `delta`.
    func outboundChanged(by delta: Int)
}

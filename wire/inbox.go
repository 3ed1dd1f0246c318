package wire

// Inbox targets: the pending-message lists an agent/inbox/spliced event
// changes (FORMAT.md §1.2).
const (
	// InboxNextTurn is the list of messages waiting for the next turn.
	InboxNextTurn = "next-turn"
	// InboxNextStep is the list of messages waiting for the next step of
	// the running turn.
	InboxNextStep = "next-step"
)

package wire

// Access is the access mode of a handle.
type Access string

// Access modes.
const (
	AccessRead  Access = "read"
	AccessWrite Access = "write"
)

// HandleRef identifies a handle independently of any process (FORMAT.md §7.3): a
// write handle can be created by one worker and used or closed by another.
type HandleRef struct {
	// SessionID is the session the handle is for.
	SessionID string `json:"sessionId"`
	// HandleID is the caller-chosen, never reused handle id.
	HandleID string `json:"handleId"`
	// Access is read or write.
	Access Access `json:"access"`
}

// Owner names the durable owner of a write lease: the workflow execution that
// holds it.
type Owner struct {
	// WorkflowID is the owning workflow id (session/<id> for sessions).
	WorkflowID string `json:"workflowId,omitempty"`
	// RunID is the run that acquired the lease.
	RunID string `json:"runId,omitempty"`
}

package wire

// Search attributes a session workflow keeps when asked to (Keyword type
// each): the session id, its phase and its working directory.
const (
	SearchAttributeSessionID    = "SessionId"
	SearchAttributeSessionPhase = "SessionPhase"
	SearchAttributeSessionCwd   = "SessionCwd"
)

// Workflow-id prefixes: a session workflow runs under SessionWorkflowIDPrefix
// followed by the encoded session id, a SessionLoop started by a client under
// LoopWorkflowIDPrefix followed by the encoded loop id.
const (
	SessionWorkflowIDPrefix = "session/"
	LoopWorkflowIDPrefix    = "loop/"
)

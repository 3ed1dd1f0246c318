package wire

import "fmt"

// CheckSessionIdentity is the identity rule of CreateSession and
// ResumeSession, a pure function: the session id must fit the store
// (CheckIDLength) and the workflow must run under WorkflowID(sessionID), the
// id docs/API.md prescribes. It returns the refusal's text as an error (the
// workflows raise it as a non-retryable InvalidArgument; clients apply it
// before they start a workflow), or nil.
func CheckSessionIdentity(workflowID, sessionID string) error {
	if err := CheckIDLength(sessionID); err != nil {
		return fmt.Errorf("%w (the id: %s)", err, truncateID(sessionID))
	}
	if want := WorkflowID(sessionID); workflowID != want {
		return fmt.Errorf("session %s must run under workflow id %q, not %q (docs/API.md: Workflow ids)",
			QuoteID(sessionID), want, workflowID)
	}
	return nil
}

// QuoteID quotes a session id as the reference texts do: between double
// quotes, verbatim.
func QuoteID(id string) string { return `"` + id + `"` }

// AlreadyExistsMessage is the reference text of a duplicate session id
// (ErrTypeAlreadyExists).
func AlreadyExistsMessage(id string) string { return "session " + QuoteID(id) + " already exists" }

// truncateID quotes an id for a message, cut to its first 64 bytes (on a
// character boundary) when longer.
func truncateID(id string) string {
	const keep = 64
	if len(id) <= keep {
		return QuoteID(id)
	}
	cut := keep
	for cut > 0 && !utf8RuneStart(id[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", QuoteID(id[:cut]), len(id))
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

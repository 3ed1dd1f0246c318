package session

import "encoding/json"

// InboxSplice is the data of an agent/inbox/spliced event (FORMAT.md §1.2):
// at Start of the Target list, RemovedCount messages are removed and
// Inserted are put in their place. The workflows write it; a resume
// replays it to find the messages still pending.
type InboxSplice struct {
	Target       string            `json:"target"`
	Start        int64             `json:"start"`
	RemovedCount int64             `json:"removedCount,omitempty"`
	Inserted     []json.RawMessage `json:"inserted"`
}

package workflows

import "fmt"

// Texts of refused requests that say which request field to set.
const (
	emptyCreateIDText = "create: the session id is required (sessionId is empty)"
	emptyResumeIDText = "resume: the session id is required (resumeSessionId is empty)"
)

// unseededInheritedText is the refusal of a create request that sets
// inheritedEventCount for a session that is not seeded: the request field
// to set, or the one to drop.
func unseededInheritedText(n int64) string {
	return fmt.Sprintf("inheritedEventCount is %d but meta.isSeeded is not set: set meta.isSeeded to true for a seeded (forked) session, or omit inheritedEventCount", n)
}

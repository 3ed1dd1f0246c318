package agent

import "context"

// OnDecode makes a's conversation cache call fn before it decodes a
// conversation.
func OnDecode(a *Activities, fn func()) { a.conversations.decoding = fn }

// CachedSessions is the number of sessions whose conversation a's cache
// holds.
func CachedSessions(a *Activities) int {
	a.conversations.mu.Lock()
	defer a.conversations.mu.Unlock()
	return len(a.conversations.sessions)
}

// SetAttempt makes a's activities see fn's answer as their attempt number.
func SetAttempt(a *Activities, fn func() int32) {
	a.attemptOf = func(context.Context) int32 { return fn() }
}

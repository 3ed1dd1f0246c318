package jsonl

import "context"

// SessionDir returns the directory of session id, found by the store's id
// lookup (an absent session is ErrNotFound). Besides the log it holds the
// files the store ignores, such as the live text of the running model call
// (package livetext); the caller must never build a session's path itself.
func (s *Store) SessionDir(ctx context.Context, id string) (string, error) {
	unlock, err := s.begin(ctx, id)
	if err != nil {
		return "", err
	}
	defer unlock()
	sd, err := s.locateStored(id)
	if err != nil {
		return "", err
	}
	return sd.dir, nil
}

// Dir returns the session's directory: the handle's own once an operation
// loaded it, else the store's id lookup (SessionDir).
func (h *Handle) Dir(ctx context.Context) (string, error) {
	if dir := h.state().dir; dir != "" {
		return dir, nil
	}
	return h.s.SessionDir(ctx, h.ref.SessionID)
}

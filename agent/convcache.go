package agent

import (
	"sync"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// maxCachedConversations bounds the sessions whose decoded messages a
// worker keeps (convCache); a session's entries are about as many as the
// events of its log the store already holds in memory.
const maxCachedConversations = 64

// convCache keeps, per session of a store, the message decoded from each
// event the model activity read (docs/DECISIONS.md D44): each Activities
// value has its own (D84), so two workers of one process share nothing. A
// model call decodes only the events stored since the last one instead of
// the whole conversation. An entry is used only for the very event it was decoded
// from: same seq, type and data (the same bytes of the store's read view,
// which entries keep alive, so the address cannot be reused). An event the
// store read again (a repair, a compaction, another process's append, a
// reopened handle) has new bytes and is decoded again; there is nothing to
// invalidate by hand. The zero value is an empty cache.
type convCache struct {
	mu       sync.Mutex // guards sessions; each entry has its own lock
	sessions map[convKey]*convEntries
	// decoding, when set (by tests), is called before a conversation is
	// decoded.
	decoding func()
}

type convKey struct {
	store *jsonl.Store
	id    string
}

// convEntries are one session's decoded events, indexed by seq. mu is held
// while a model call decodes into them, so calls of other sessions do not
// wait for it.
type convEntries struct {
	mu    sync.Mutex
	byseq []convEntry
}

// convEntry is the decoded message of one event: ok false for an event
// that carries no message.
type convEntry struct {
	typ  string
	data []byte
	msg  provider.Message
	ok   bool
}

// sameBytes reports whether a and b are the same slice of memory.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && len(a) > 0 && &a[0] == &b[0]
}

// conversation is Conversation(events) for session id of st, decoding only
// the events the cache does not hold.
func (c *convCache) conversation(st *jsonl.Store, id string, events []session.Event) ([]provider.Message, error) {
	out, _, err := c.conversationSeqs(st, id, events)
	return out, err
}

// conversationSeqs is conversation, with the seq of the event of each
// message.
func (c *convCache) conversationSeqs(st *jsonl.Store, id string, events []session.Event) ([]provider.Message, []int64, error) {
	if c.decoding != nil {
		c.decoding()
	}
	order, err := surfaceOrder(events)
	if err != nil {
		return nil, nil, err
	}
	ce := c.entries(convKey{st, id})
	ce.mu.Lock()
	defer ce.mu.Unlock()
	var out []provider.Message
	var seqs []int64
	for _, i := range order {
		e := events[i]
		if !isMessageEvent(e.Type) {
			continue
		}
		if e.Seq < 0 || e.Seq > wire.MaxSafeInteger {
			msg, ok, err := messageOf(e)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				out, seqs = append(out, msg), append(seqs, e.Seq)
			}
			continue
		}
		if int64(len(ce.byseq)) <= e.Seq {
			ce.byseq = append(ce.byseq, make([]convEntry, int(e.Seq)+1-len(ce.byseq))...)
		}
		en := &ce.byseq[e.Seq]
		if en.typ != e.Type || !sameBytes(en.data, e.Data) {
			msg, ok, err := messageOf(e)
			if err != nil {
				*en = convEntry{}
				return nil, nil, err
			}
			*en = convEntry{typ: e.Type, data: e.Data, msg: msg, ok: ok}
		}
		if en.ok {
			out, seqs = append(out, en.msg), append(seqs, e.Seq)
		}
	}
	return out, seqs, nil
}

// entries returns the session's entries, made (and another session's
// dropped when the cache is full) if it has none.
func (c *convCache) entries(k convKey) *convEntries {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[convKey]*convEntries{}
	}
	ce := c.sessions[k]
	if ce == nil {
		if len(c.sessions) >= maxCachedConversations {
			for old := range c.sessions {
				delete(c.sessions, old)
				break
			}
		}
		ce = &convEntries{}
		c.sessions[k] = ce
	}
	return ce
}

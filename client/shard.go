package client

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Shard is one store root served by its own task queue: the workers of the
// shard poll TaskQueue and store under that root, so a session started on
// TaskQueue keeps its log there (docs/SCALING.md).
type Shard struct {
	// Name identifies the shard; the router hashes it with the session id,
	// so a shard keeps its sessions when the configuration is reordered or
	// another shard is added.
	Name string `json:"name"`
	// TaskQueue is the task queue the shard's workers poll.
	TaskQueue string `json:"taskQueue"`
}

// String returns name=task-queue, the form ParseShard reads.
func (s Shard) String() string { return s.Name + "=" + s.TaskQueue }

// ErrShardConfig is the class of a shard list the router refuses: no shard,
// an empty or malformed name or task queue, a name or task queue given
// twice.
var ErrShardConfig = errors.New("invalid shard configuration")

// ErrUnknownShard matches a call whose OnShard names no configured shard.
var ErrUnknownShard = errors.New("unknown shard")

// ParseShard reads a shard given as name=task-queue.
func ParseShard(s string) (Shard, error) {
	name, queue, ok := strings.Cut(s, "=")
	if !ok {
		return Shard{}, fmt.Errorf("%w: shard %q is not name=task-queue", ErrShardConfig, s)
	}
	sh := Shard{Name: name, TaskQueue: queue}
	return sh, sh.check()
}

// check refuses an empty or malformed name or task queue.
func (s Shard) check() error {
	switch {
	case s.Name == "":
		return fmt.Errorf("%w: shard %q has no name", ErrShardConfig, s.String())
	case strings.ContainsAny(s.Name, "=, \t\r\n"):
		return fmt.Errorf("%w: shard name %q holds '=', ',' or white space", ErrShardConfig, s.Name)
	case strings.TrimSpace(s.TaskQueue) == "":
		return fmt.Errorf("%w: shard %q has no task queue", ErrShardConfig, s.Name)
	}
	return nil
}

// Router maps a session id to the shard that holds it: the shard of highest
// rendezvous (highest random weight) score, the score being the first 8
// bytes of SHA-256(name, 0, id) read as a big-endian integer. The mapping
// depends only on the shard names and the id: the order of the
// configuration does not matter, adding a shard moves only the ids that now
// score highest on the new shard (about 1/(n+1) of them, none between the
// existing shards), and removing one moves only its own ids
// (docs/DECISIONS.md D59). A Router is immutable and safe for concurrent
// use.
type Router struct {
	shards []Shard // sorted by name
}

// NewRouter returns the router over shards. It refuses (ErrShardConfig) an
// empty list, a malformed shard, and a name or a task queue given twice: two
// names on one task queue would be one root under two names.
func NewRouter(shards ...Shard) (*Router, error) {
	if len(shards) == 0 {
		return nil, fmt.Errorf("%w: no shard", ErrShardConfig)
	}
	r := &Router{shards: slices.Clone(shards)}
	slices.SortFunc(r.shards, func(a, b Shard) int { return strings.Compare(a.Name, b.Name) })
	queues := make(map[string]string, len(shards))
	for i, s := range r.shards {
		if err := s.check(); err != nil {
			return nil, err
		}
		if i > 0 && r.shards[i-1].Name == s.Name {
			return nil, fmt.Errorf("%w: shard %q is given twice", ErrShardConfig, s.Name)
		}
		if other, ok := queues[s.TaskQueue]; ok {
			return nil, fmt.Errorf("%w: shards %q and %q share task queue %q", ErrShardConfig, other, s.Name, s.TaskQueue)
		}
		queues[s.TaskQueue] = s.Name
	}
	return r, nil
}

// Shards returns the shards, sorted by name.
func (r *Router) Shards() []Shard { return slices.Clone(r.shards) }

// Lookup returns the shard named name.
func (r *Router) Lookup(name string) (Shard, bool) {
	i, ok := slices.BinarySearchFunc(r.shards, name, func(s Shard, n string) int { return strings.Compare(s.Name, n) })
	if !ok {
		return Shard{}, false
	}
	return r.shards[i], true
}

// Route returns the shard of session id: the one of highest score; equal
// scores (a SHA-256 prefix collision) go to the first name.
func (r *Router) Route(id string) Shard {
	best, bestScore := 0, uint64(0)
	for i, s := range r.shards {
		if sc := rendezvousScore(s.Name, id); i == 0 || sc > bestScore {
			best, bestScore = i, sc
		}
	}
	return r.shards[best]
}

// rendezvousScore is the weight of shard name for id. The zero byte keeps
// ("ab", "c") and ("a", "bc") apart; a shard name holds no zero byte.
func rendezvousScore(name, id string) uint64 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}

// CallOption adjusts one call that starts a session or loop workflow
// (Create, Resume, LoopStart).
type CallOption func(*callOptions)

type callOptions struct {
	shard string
}

// OnShard starts the workflow on the named shard instead of the one the
// router picks. A session created on an explicit shard lives in that
// shard's root: resuming it later needs the same OnShard. The name must be
// one of Options.Router's shards (else ErrUnknownShard).
func OnShard(name string) CallOption {
	return func(o *callOptions) { o.shard = name }
}

// ShardOf returns the shard a workflow start for id goes to under opts:
// the OnShard override, else the router's choice. Without a router the
// client has one shard, named after and served by Options.TaskQueue.
func (c *Client) ShardOf(id string, opts ...CallOption) (Shard, error) {
	var o callOptions
	for _, f := range opts {
		f(&o)
	}
	r := c.opts.Router
	switch {
	case o.shard != "" && r == nil:
		if o.shard == c.opts.TaskQueue {
			return Shard{Name: o.shard, TaskQueue: o.shard}, nil
		}
		return Shard{}, &Error{Type: TypeUnknownShard, Message: fmt.Sprintf("shard %q is not configured: the client has no shards", o.shard), SessionID: id, Err: ErrUnknownShard}
	case o.shard != "":
		s, ok := r.Lookup(o.shard)
		if !ok {
			return Shard{}, &Error{Type: TypeUnknownShard, Message: fmt.Sprintf("shard %q is not configured (shards: %s)", o.shard, shardNames(r.shards)), SessionID: id, Err: ErrUnknownShard}
		}
		return s, nil
	case r != nil:
		return r.Route(id), nil
	}
	return Shard{Name: c.opts.TaskQueue, TaskQueue: c.opts.TaskQueue}, nil
}

// TypeUnknownShard: a call's OnShard names no configured shard.
const TypeUnknownShard = "UnknownShard"

func shardNames(shards []Shard) string {
	names := make([]string, len(shards))
	for i, s := range shards {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

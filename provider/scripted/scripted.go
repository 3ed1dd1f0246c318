// Package scripted is a deterministic model provider driven by a script of
// responses (docs/SCRIPTED.md): it streams text, reasoning and tool calls
// chunk by chunk, and fails or stalls on cue. A script may give the model a
// context window, which refuses larger requests as the real providers do
// (provider.CodeContextWindowExceeded), and answers compaction calls apart
// from its responses. Tests and the demo use it.
//
// Layering (README.md, Architecture; testsuite/layers checks it): row 3, with
// provider: it may import provider, wire, internal/lib/... and session, and
// nothing above.
package scripted

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/provider"
)

// Provider is a provider.Provider that answers from a Script. It is safe
// for concurrent use.
type Provider struct {
	script Script

	mu          sync.Mutex
	attempts    map[attemptKey]int
	maxRequest  map[string]int // session → the largest request estimate
	compactions map[string]int // session → compaction calls
}

// CompactionIndex is the index under which Attempts counts the calls
// answered by the script's compaction response (or its default summary).
const CompactionIndex = -1

// attemptKey names the calls of one response for one session.
type attemptKey struct {
	session string
	index   int
}

// New returns a Provider answering from s, after checking it as Parse does.
// The Provider keeps s; the caller must not modify it afterwards.
func New(s Script) (*Provider, error) {
	if err := validate(s); err != nil {
		return nil, err
	}
	return &Provider{script: s, attempts: make(map[attemptKey]int),
		maxRequest: make(map[string]int), compactions: make(map[string]int)}, nil
}

// Script returns the script the Provider answers from.
func (p *Provider) Script() Script { return p.script }

// ContextWindow returns the script's context window in tokens, 0 for none
// (provider.WindowReporter).
func (p *Provider) ContextWindow() int64 { return p.script.ContextWindow }

var _ provider.WindowReporter = (*Provider)(nil)

// Attempts returns how many calls the Provider has answered with response
// index of session sessionID (CompactionIndex: with the compaction
// response). A call refused for exceeding the context window is not one.
func (p *Provider) Attempts(sessionID string, index int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts[attemptKey{sessionID, index}]
}

// MaxRequestTokens returns the largest provider.EstimateRequest of the
// requests the Provider was asked for session sessionID, ordinary and
// compaction calls alike, those refused for exceeding the context window
// included; 0 before any.
func (p *Provider) MaxRequestTokens(sessionID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxRequest[sessionID]
}

// CompactionCalls returns the number of compaction calls (requests whose
// Purpose is provider.PurposeCompaction) the Provider was asked for
// session sessionID, those refused for exceeding the context window
// included.
func (p *Provider) CompactionCalls(sessionID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.compactions[sessionID]
}

// ResponseIndex returns the index of the response that answers req: the
// number of assistant messages in its conversation, so that a retried call
// gets the same response.
func ResponseIndex(req provider.Request) int {
	n := 0
	for _, m := range req.Messages {
		if m.Role == provider.RoleAssistant {
			n++
		}
	}
	return n
}

// Stream implements provider.Provider. A request whose
// provider.EstimateRequest exceeds the script's context window is refused
// first, before any chunk, with a non-retryable *provider.Error (status
// 400, code provider.CodeContextWindowExceeded, message "request of N
// estimated tokens exceeds the context window of W"). A compaction call
// (Purpose provider.PurposeCompaction) streams the script's compaction
// response, or the default summary "Summary of K messages." (K the
// request's messages before its last). Any other call streams response
// ResponseIndex(req) (wrapped around when the script loops); past the end
// of a script that does not loop it yields a non-retryable *provider.Error
// "script exhausted: ...". It stops with ctx's error when ctx is done
// between chunks.
func (p *Provider) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	return func(yield func(provider.Chunk, error) bool) {
		compaction := req.Purpose == provider.PurposeCompaction
		tokens := provider.EstimateRequest(req)
		p.record(req.SessionID, tokens, compaction)
		if w := p.script.ContextWindow; w > 0 && int64(tokens) > w {
			yield(provider.Chunk{}, &provider.Error{
				Status:  400,
				Code:    provider.CodeContextWindowExceeded,
				Message: fmt.Sprintf("request of %d estimated tokens exceeds the context window of %d", tokens, w),
			})
			return
		}
		var r *Response
		var index int
		if compaction {
			index, r = CompactionIndex, p.script.Compaction
			if r == nil {
				r = &Response{Text: defaultSummary(req)}
			}
		} else {
			index = ResponseIndex(req)
			responses, loop := p.script.responsesFor(req)
			n := len(responses)
			if index >= n && !loop {
				yield(provider.Chunk{}, &provider.Error{
					Code:    "SCRIPT_EXHAUSTED",
					Message: fmt.Sprintf("script exhausted: response %d requested, the script has %d", index, n),
				})
				return
			}
			r = &responses[index%n]
		}
		attempt := p.countAttempt(req.SessionID, index)
		s := streamer{ctx: ctx, done: ctx.Done(), yield: yield, failAt: -1, stallAt: -1}
		if f := r.Fail; f != nil && (f.Attempts == 0 || attempt <= f.Attempts) {
			s.failAt, s.fail = f.AfterChunks, f
		}
		if st := r.Stall; st != nil && (st.Attempts == 0 || attempt <= st.Attempts) {
			s.stallAt = st.AfterChunks
		}
		if r.DelayMs > 0 {
			s.delay = time.Duration(r.DelayMs) * time.Millisecond
			s.timer = time.NewTimer(s.delay)
			defer s.timer.Stop()
		}
		s.run(r)
	}
}

// defaultSummary is the text that answers a compaction call of a script
// without a compaction response: "Summary of K messages.", K the number of
// req's messages before its last (the instruction to summarise).
func defaultSummary(req provider.Request) string {
	return fmt.Sprintf("Summary of %d messages.", max(len(req.Messages)-1, 0))
}

// record notes a request of tokens estimated tokens for session, a
// compaction call when compaction is set.
func (p *Provider) record(session string, tokens int, compaction bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.maxRequest[session] = max(p.maxRequest[session], tokens)
	if compaction {
		p.compactions[session]++
	}
}

// countAttempt counts a call of response index for session and returns its
// 1-based number.
func (p *Provider) countAttempt(session string, index int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := attemptKey{session, index}
	p.attempts[k]++
	return p.attempts[k]
}

// streamer emits the chunks of one call.
type streamer struct {
	ctx     context.Context
	done    <-chan struct{}
	yield   func(provider.Chunk, error) bool
	n       int // chunks emitted
	failAt  int // -1: no failure
	fail    *Fail
	stallAt int // -1: no stall
	delay   time.Duration
	timer   *time.Timer
	timed   bool // the timer has fired once
}

// run streams r; it returns when the stream ended or the consumer stopped.
func (s *streamer) run(r *Response) {
	if !s.pieces(provider.ChunkReasoning, r.Reasoning, r.ChunkSize) ||
		!s.pieces(provider.ChunkText, r.Text, r.ChunkSize) {
		return
	}
	for i, c := range r.ToolCalls {
		args := c.Arguments
		first := provider.Chunk{Type: provider.ChunkToolCall, Index: i, ID: c.ID, Name: c.Name}
		if args == "" {
			if !s.emit(first) {
				return
			}
			continue
		}
		ok := split(args, r.ChunkSize, func(piece string) bool {
			ch := provider.Chunk{Type: provider.ChunkToolCall, Index: i, Delta: piece}
			if first.ID != "" {
				ch.ID, ch.Name, first.ID = c.ID, c.Name, ""
			}
			return s.emit(ch)
		})
		if !ok {
			return
		}
	}
	if r.Usage != nil {
		u := *r.Usage
		if !s.emit(provider.Chunk{Type: provider.ChunkUsage, Usage: &u}) {
			return
		}
	}
	finish := r.Finish
	if finish == "" {
		finish = provider.FinishStop
		if len(r.ToolCalls) > 0 {
			finish = provider.FinishToolCalls
		}
	}
	s.emit(provider.Chunk{Type: provider.ChunkFinish, Finish: finish})
}

// pieces streams text as deltas of kind.
func (s *streamer) pieces(kind provider.ChunkType, text string, size int) bool {
	return split(text, size, func(piece string) bool {
		return s.emit(provider.Chunk{Type: kind, Delta: piece})
	})
}

// emit yields c after the response's delay, unless the call fails, stalls
// or its context is done first; it reports whether to go on.
func (s *streamer) emit(c provider.Chunk) bool {
	if s.n == s.failAt {
		f := s.fail
		msg := f.Message
		if msg == "" {
			msg = "scripted failure"
		}
		s.yield(provider.Chunk{}, &provider.Error{
			Retryable:  f.Retryable,
			Status:     f.Status,
			Code:       f.Code,
			Message:    msg,
			RetryAfter: time.Duration(f.RetryAfterMs) * time.Millisecond,
		})
		return false
	}
	if s.n == s.stallAt {
		<-s.done
		s.yield(provider.Chunk{}, s.ctx.Err())
		return false
	}
	if s.timer != nil {
		if s.timed {
			s.timer.Reset(s.delay)
		}
		s.timed = true
		select {
		case <-s.timer.C:
		case <-s.done:
			s.yield(provider.Chunk{}, s.ctx.Err())
			return false
		}
	}
	select {
	case <-s.done:
		s.yield(provider.Chunk{}, s.ctx.Err())
		return false
	default:
	}
	s.n++
	return s.yield(c, nil)
}

// split calls fn with the consecutive pieces of s of size runes (the whole
// of s when size is 0), stopping when fn returns false; it reports whether
// every piece was taken. An empty s has no pieces.
func split(s string, size int, fn func(string) bool) bool {
	if s == "" {
		return true
	}
	if size <= 0 {
		return fn(s)
	}
	for len(s) > 0 {
		end, runes := 0, 0
		for end < len(s) && runes < size {
			if s[end] < utf8.RuneSelf {
				end++
			} else {
				_, w := utf8.DecodeRuneInString(s[end:])
				end += w
			}
			runes++
		}
		if !fn(s[:end]) {
			return false
		}
		s = s[end:]
	}
	return true
}

// responsesFor returns the responses answering req: those of the first
// branch its first user message matches, else the script's.
func (s Script) responsesFor(req provider.Request) ([]Response, bool) {
	if len(s.Branches) == 0 {
		return s.Responses, s.Loop
	}
	var first string
	for _, m := range req.Messages {
		if m.Role != provider.RoleUser {
			continue
		}
		for _, b := range m.Content {
			if b.Type == provider.BlockText {
				first += b.Text
			}
		}
		break
	}
	for _, b := range s.Branches {
		if strings.Contains(first, b.When) {
			return b.Responses, b.Loop
		}
	}
	return s.Responses, s.Loop
}

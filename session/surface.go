package session

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sessionflow/sessionflow/wire"
)

// SurfaceFold is the model-visible surface of a log (docs/FORMAT.md §1.2):
// the seqs of the surface events in the order the model sees them, and every
// replacement that shaped it, in log order.
type SurfaceFold struct {
	// Nodes are the seqs of the current surface events, in surface order.
	Nodes []int64
	// Replacements lists the replace operations, in log order.
	Replacements []SurfaceReplacement
}

// SurfaceReplacement is one replace operation of a fold: the event at Seq
// took the place of the surface range from the node Start to the node End,
// whose nodes were Shadowed (in surface order).
type SurfaceReplacement struct {
	// Seq is the replacing event.
	Seq int64
	// Start and End are the first and last replaced nodes.
	Start, End int64
	// Shadowed are the nodes the replacement removed from the surface.
	Shadowed []int64
}

// FoldSurface folds a whole log, from seq 0, into its surface, with the rules
// of the published harness's surface fold (@deepseek-ai/dsh-session,
// lib/types/surface.js, foldSurface), event by event as Surface.Next applies
// them. The first event that breaks a rule fails the fold with its seq.
func FoldSurface(events []Event) (SurfaceFold, error) {
	var s Surface
	var reps []SurfaceReplacement
	for _, e := range events {
		p, err := s.plan(e)
		if err != nil {
			return SurfaceFold{}, err
		}
		if p.kind == planReplace {
			reps = append(reps, SurfaceReplacement{Seq: e.Seq, Start: p.start, End: p.end,
				Shadowed: slices.Clone(s.nodes[p.startIdx : p.endIdx+1])})
		}
		s.apply(e, p)
	}
	return SurfaceFold{Nodes: s.Nodes(), Replacements: reps}, nil
}

// Surface is the surface fold of a log kept incrementally, for a writer that
// checks each event before it appends it. The zero value is the surface of
// an empty log; feed it the log's events in order with Next.
//
// The rules are those of the published harness (surface.js,
// planSurfaceEvent). Each event must have the next seq. An event of a type
// that is not surface-eligible (SurfaceEligible) must carry neither
// surfaceOp nor sourceEventSeqs and leaves the surface as it is. The harness's
// three surface types, user/message, assistant/message and tool/result,
// must carry a surfaceOp; system/message, a type of sessionflow's own that
// the harness does not know, may carry one and joins the surface only when it
// does. Then:
//   - sourceEventSeqs, when present, must be non-empty (except on
//     assistant/message, which cites the chunks it was assembled from and may
//     cite none), hold no duplicate, and cite only earlier seqs;
//   - "append" adds the event at the end of the surface;
//   - a replace names its first and last replaced nodes by seq: both must be
//     current nodes, the first not after the last in surface order, and the
//     event's sourceEventSeqs must cite every node of that range; the event
//     takes the range's place;
//   - a tool/result replacement replaces exactly one node, a tool/result, and
//     may change only the content of its tool-result block.
//
// A Surface is not safe for concurrent use.
type Surface struct {
	next  int64
	nodes []int64
	// rest maps each tool/result node of the surface to what a replacement
	// of it must keep (toolResultRest).
	rest map[int64]restKey
	// generation counts the replacements applied.
	generation int64
}

// restKey is the comparable form of a tool/result's data without the
// content of its tool-result block, or the reason it has none.
type restKey struct {
	key string
	err error
}

// Next checks e against the surface and applies it. On error the surface is
// unchanged, so the caller can refuse e and go on with another event.
func (s *Surface) Next(e Event) error {
	p, err := s.plan(e)
	if err != nil {
		return err
	}
	s.apply(e, p)
	return nil
}

// Check reports whether Next would accept e, without applying it.
func (s *Surface) Check(e Event) error {
	_, err := s.plan(e)
	return err
}

// Nodes returns a copy of the seqs of the current surface, in surface order.
func (s *Surface) Nodes() []int64 {
	return append(make([]int64, 0, len(s.nodes)), s.nodes...)
}

// NextSeq is the seq the next event must have.
func (s *Surface) NextSeq() int64 { return s.next }

// Generation counts the replacements applied so far; it changes exactly when
// an earlier part of the surface changed.
func (s *Surface) Generation() int64 { return s.generation }

type planKind int

const (
	planNone planKind = iota
	planAppend
	planReplace
)

// surfacePlan is the validated transition of one event.
type surfacePlan struct {
	kind             planKind
	start, end       int64
	startIdx, endIdx int
	// rest is the event's own restKey when it is a tool/result node.
	rest *restKey
}

// plan validates e against s without modifying s.
func (s *Surface) plan(e Event) (surfacePlan, error) {
	if e.Seq != s.next {
		return surfacePlan{}, fmt.Errorf("surface: event seq %d is not contiguous; expected %d", e.Seq, s.next)
	}
	op, err := surfaceOpOf(e)
	if err != nil || op == nil {
		return surfacePlan{}, err
	}
	var p surfacePlan
	if op.Op == SurfaceAppend {
		if err := checkProvenance(e, nil); err != nil {
			return surfacePlan{}, err
		}
		p.kind = planAppend
	} else {
		p = surfacePlan{kind: planReplace, start: op.StartSeq, end: op.EndSeq, startIdx: -1, endIdx: -1}
		p.startIdx = slices.Index(s.nodes, op.StartSeq)
		if p.startIdx < 0 {
			return surfacePlan{}, fmt.Errorf("surface: replace at seq %d: start seq %d is not a current surface node", e.Seq, op.StartSeq)
		}
		p.endIdx = slices.Index(s.nodes, op.EndSeq)
		if p.endIdx < 0 {
			return surfacePlan{}, fmt.Errorf("surface: replace at seq %d: end seq %d is not a current surface node", e.Seq, op.EndSeq)
		}
		if p.startIdx > p.endIdx {
			return surfacePlan{}, fmt.Errorf("surface: replace at seq %d: start seq %d (node %d) comes after end seq %d (node %d)",
				e.Seq, op.StartSeq, p.startIdx, op.EndSeq, p.endIdx)
		}
		shadowed := s.nodes[p.startIdx : p.endIdx+1]
		if err := checkProvenance(e, shadowed); err != nil {
			return surfacePlan{}, err
		}
		if err := s.checkToolResultRewrite(e, shadowed); err != nil {
			return surfacePlan{}, err
		}
	}
	if e.Type == wire.TypeToolResult {
		k := toolResultRest(e.Data)
		p.rest = &k
	}
	return p, nil
}

// apply commits a plan of e.
func (s *Surface) apply(e Event, p surfacePlan) {
	s.next++
	switch p.kind {
	case planAppend:
		s.nodes = append(s.nodes, e.Seq)
	case planReplace:
		for _, seq := range s.nodes[p.startIdx : p.endIdx+1] {
			delete(s.rest, seq)
		}
		s.nodes = slices.Replace(s.nodes, p.startIdx, p.endIdx+1, e.Seq)
		s.generation++
	default:
		return
	}
	if p.rest != nil {
		if s.rest == nil {
			s.rest = map[int64]restKey{}
		}
		s.rest[e.Seq] = *p.rest
	}
}

// harnessSurfaceTypes are the surface types of the published harness, on
// which a surfaceOp is required.
func harnessSurfaceType(t string) bool {
	return t == wire.TypeUserMessage || t == wire.TypeAssistantMessage || t == wire.TypeToolResult
}

// surfaceOpOf checks where e may carry surface metadata and returns its
// operation, nil for an event that does not join the surface.
func surfaceOpOf(e Event) (*SurfaceOp, error) {
	if !SurfaceEligible(e.Type) {
		if e.SurfaceOp != nil {
			return nil, fmt.Errorf("surface: %q event at seq %d is not surface-eligible and cannot carry surfaceOp", e.Type, e.Seq)
		}
		if e.SourceEventSeqs != nil {
			return nil, fmt.Errorf("surface: %q event at seq %d is not surface-eligible and cannot carry sourceEventSeqs", e.Type, e.Seq)
		}
		return nil, nil
	}
	op := e.SurfaceOp
	if op == nil {
		if harnessSurfaceType(e.Type) {
			return nil, fmt.Errorf("surface: %q event at seq %d lacks the surfaceOp its type requires", e.Type, e.Seq)
		}
		if e.SourceEventSeqs != nil {
			return nil, fmt.Errorf("surface: %q event at seq %d carries sourceEventSeqs without a surfaceOp", e.Type, e.Seq)
		}
		return nil, nil
	}
	switch op.Op {
	case SurfaceAppend:
		return op, nil
	case SurfaceReplace:
		if op.StartSeq < 0 || op.StartSeq > wire.MaxSafeInteger || op.EndSeq < 0 || op.EndSeq > wire.MaxSafeInteger {
			return nil, fmt.Errorf("surface: %q event at seq %d carries a replace surfaceOp whose bounds are not non-negative safe integers", e.Type, e.Seq)
		}
		return op, nil
	}
	return nil, fmt.Errorf("surface: %q event at seq %d carries an invalid surfaceOp %q", e.Type, e.Seq, op.Op)
}

// checkProvenance checks the sourceEventSeqs of a surface event that
// appends (shadowed nil) or replaces the nodes shadowed.
func checkProvenance(e Event, shadowed []int64) error {
	src := e.SourceEventSeqs
	if src != nil && len(src) == 0 && e.Type != wire.TypeAssistantMessage {
		return fmt.Errorf("surface: sourceEventSeqs of the %q event at seq %d is empty (only assistant/message may cite nothing)", e.Type, e.Seq)
	}
	cited := make(map[int64]bool, len(src))
	later := int64(-1)
	for _, s := range src {
		if s < 0 || s > wire.MaxSafeInteger {
			return fmt.Errorf("surface: sourceEventSeqs of the event at seq %d holds %d, not a non-negative safe integer", e.Seq, s)
		}
		cited[s] = true
		if later < 0 && s >= e.Seq {
			later = s
		}
	}
	if len(cited) != len(src) {
		return fmt.Errorf("surface: sourceEventSeqs of the event at seq %d cites a seq twice", e.Seq)
	}
	if later >= 0 {
		return fmt.Errorf("surface: sourceEventSeqs of the event at seq %d cites %d, which is not an earlier event", e.Seq, later)
	}
	var missing []int64
	for _, s := range shadowed {
		if !cited[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("surface: replace at seq %d: sourceEventSeqs must cite every replaced node; missing %v", e.Seq, missing)
	}
	return nil
}

// checkToolResultRewrite restricts a tool/result replacement to the content
// of one current tool/result.
func (s *Surface) checkToolResultRewrite(e Event, shadowed []int64) error {
	if e.Type != wire.TypeToolResult {
		return nil
	}
	if len(shadowed) != 1 {
		return fmt.Errorf("surface: tool/result replacement at seq %d replaces %d nodes; it must replace exactly one", e.Seq, len(shadowed))
	}
	orig, ok := s.rest[shadowed[0]]
	if !ok {
		return fmt.Errorf("surface: tool/result replacement at seq %d replaces node %d, which is not a tool/result", e.Seq, shadowed[0])
	}
	mine := toolResultRest(e.Data)
	switch {
	case orig.err != nil:
		return fmt.Errorf("surface: tool/result replacement at seq %d: the replaced tool/result %d: %w", e.Seq, shadowed[0], orig.err)
	case mine.err != nil:
		return fmt.Errorf("surface: tool/result replacement at seq %d: %w", e.Seq, mine.err)
	case orig.key != mine.key:
		return fmt.Errorf("surface: tool/result replacement at seq %d may change only the content of the result it replaces (%d)", e.Seq, shadowed[0])
	}
	return nil
}

// errNoToolResultBlock: a tool/result whose data is not an object holding a
// message whose content starts with an object.
var errNoToolResultBlock = errors.New("its data has no message whose content starts with a block")

// toolResultRest is the comparable form of a tool/result's data with the
// content of the first block of message.content set to null: the part of it
// a surface replacement must keep (the harness compares the two with a
// deep, order-free equality over JSON values, numbers by value).
func toolResultRest(data []byte) restKey {
	v, err := parseJSValue(data)
	if err != nil {
		return restKey{err: err}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return restKey{err: errNoToolResultBlock}
	}
	msg, ok := obj["message"].(map[string]any)
	if !ok {
		return restKey{err: errNoToolResultBlock}
	}
	content, ok := msg["content"].([]any)
	if !ok || len(content) == 0 {
		return restKey{err: errNoToolResultBlock}
	}
	first, ok := content[0].(map[string]any)
	if !ok {
		return restKey{err: errNoToolResultBlock}
	}
	block := make(map[string]any, len(first))
	for k, v := range first {
		block[k] = v
	}
	block["content"] = nil
	m := make(map[string]any, len(msg))
	for k, v := range msg {
		m[k] = v
	}
	m["content"] = []any{block}
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		rest[k] = v
	}
	rest["message"] = m
	return restKey{key: jsKey(rest)}
}

package jsonl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Zstandard-specific corruption texts (FORMAT.md §4.4).
var (
	errZstdHeaderless    = errors.New("empty or header-less Zstandard session log")
	errZstdHeaderFrame   = errors.New("corrupt Zstandard session log: first frame is not exactly one header line")
	errZstdHeaderInvalid = errors.New("corrupt Zstandard session log: header frame failed validation")
	errZstdTornRecord    = errors.New("corrupt Zstandard session log: complete frame contains a torn JSONL record")
)

// scanResult is a validated physical log (FORMAT.md §4.3, §4.4).
type scanResult struct {
	header wire.Header
	// events is the valid contiguous prefix (complete frames only, in zstd).
	events []session.Event
	// committedBytes ends the last valid record (raw) or complete frame (zstd).
	committedBytes int64
	// tornTruncateTo is the offset a write handle cuts the file to before its
	// first mutation, or -1 when the file has no damaged suffix.
	tornTruncateTo int64
	// recovered holds the complete valid records of a torn final zstd frame;
	// the write path re-writes them as a fresh frame after truncating.
	recovered []session.Event
	// size is the physical size of the scanned bytes.
	size int64
	// forcedCut is set when a forced scan accepted damage that is not a torn
	// write (complete valid records follow it): cutting at tornTruncateTo
	// then removes records that were once acknowledged.
	forcedCut bool
}

// lineScanner is the incremental event-line scanner of FORMAT.md §4.3.
type lineScanner struct {
	strict bool
	// intactTail refuses damage followed by a complete valid record (a raw
	// log's rule): a crash tears only the final write, so valid records
	// after damage prove the damage is not a torn write.
	intactTail bool
	// force accepts any damage as a suffix to cut: the first damaged record
	// and everything after it (a forced repair).
	force bool
	// base is the offset of the scanned bytes in the file, for messages.
	base   int64
	line   int64
	events []session.Event
	issue  error
	// damagedAt is the file offset where the first damaged record starts
	// (meaningful once issue is set); damaged is set when the scan went
	// past damage that a torn write cannot explain (force only).
	damagedAt int64
	damaged   bool
	// harness applies the published harness's scan to a v0 log (FORMAT.md
	// §8.2): a line that is JSON but not a valid event is not damage a
	// crash could leave (a torn write is never a complete JSON line), so
	// the log is refused rather than cut there, as the harness's load
	// refuses it.
	harness bool
}

// feed scans the complete lines of buf and returns the number of bytes
// consumed by valid records (a prefix of buf). It returns an error when the
// log must be refused as corrupt; in strict mode any bad record is fatal.
//
// Lines are decoded first, in parallel for large inputs, and the rules of
// FORMAT.md §4.3 are then applied in order over the decoded lines. Accepted
// events may alias buf, which must not be modified afterwards.
func (s *lineScanner) feed(buf []byte) (int64, error) {
	return s.feedChunks(decodeChunks(buf))
}

// feedChunks is feed over the decoded chunks of a buffer (see
// decodeChunks), in order.
func (s *lineScanner) feedChunks(chunks []lineChunk) (int64, error) {
	total := 0
	for i := range chunks {
		total += len(chunks[i].events)
	}
	s.events = slices.Grow(s.events, total)
	var committed int64
	for ci := range chunks {
		chunk := &chunks[ci]
		errs := chunk.errs
		for i := range chunk.events {
			s.line++
			ev := &chunk.events[i]
			var (
				err   error
				probe seqProbe
			)
			if len(errs) > 0 && errs[0].line == i {
				err, probe, errs = errs[0].err, errs[0].seq, errs[1:]
			}
			if errors.Is(err, session.ErrUnparsable) {
				if s.issue == nil {
					s.issue = fmt.Errorf("corrupt session log: unparsable committed event at line %d", s.line)
					s.damagedAt = s.base + committed
				}
				if s.strict {
					return committed, s.issue
				}
				continue
			}
			isTurnEnd := ev.Type == wire.TypeTurnEnd
			if s.issue != nil {
				switch {
				case s.force:
					s.damaged = s.damaged || isTurnEnd || err == nil
				case isTurnEnd:
					return committed, s.notTorn(s.issue)
				case s.intactTail && err == nil:
					return committed, &damageError{issue: s.issue, offset: s.damagedAt, line: s.line, validAt: s.base + s.lineStart(chunk, i)}
				}
				continue
			}
			if err != nil && s.harness && !s.force && !errors.Is(err, session.ErrMalformedChunkRow) {
				// The harness's scan keeps a JSON line whose seq continues
				// the log, and its load then refuses the log; any other
				// seq is a gap, damage as below. On a null line its scan
				// throws.
				if probe.null || (probe.number && probe.value == float64(len(s.events))) {
					return committed, fmt.Errorf("corrupt session log: invalid committed event at line %d: %w", s.line, err)
				}
			}
			if err == nil {
				if want := int64(len(s.events)); ev.Seq != want {
					err = fmt.Errorf("seq gap (expected %d, got %d)", want, ev.Seq)
				}
			}
			if err != nil {
				s.issue = fmt.Errorf("corrupt session log: invalid committed event at line %d: %w", s.line, err)
				s.damagedAt = s.base + committed
				if s.force {
					s.damaged = s.damaged || isTurnEnd
					continue
				}
				if s.strict {
					return committed, s.issue
				}
				if isTurnEnd {
					return committed, s.notTorn(s.issue)
				}
				continue
			}
			if session.IsChunkRow(*ev) {
				// A packed row stands for a run of events (FORMAT.md §1.6);
				// the decoder validated it, so it expands.
				members, err := session.ExpandChunkRow(*ev)
				if err != nil {
					return committed, fmt.Errorf("corrupt session log: invalid committed event at line %d: %w", s.line, err)
				}
				s.events = append(s.events, members...)
			} else {
				s.events = append(s.events, *ev)
			}
			committed = int64(chunk.ends[i] + 1)
		}
	}
	return committed, nil
}

// lineStart returns the offset, in the scanned bytes, where line i of chunk
// starts.
func (s *lineScanner) lineStart(chunk *lineChunk, i int) int64 {
	if i > 0 {
		return int64(chunk.ends[i-1] + 1)
	}
	return int64(chunk.start)
}

// notTorn marks the refusal of damage sitting before a turn/end in a raw
// log: its text stays the text of FORMAT.md §4.3, and it matches
// ErrDamageNotTorn (only a forced repair cuts it).
func (s *lineScanner) notTorn(issue error) error {
	if !s.intactTail {
		return issue
	}
	return &committedDamage{issue: issue}
}

// committedDamage is damage before a turn/end: not a torn write.
type committedDamage struct{ issue error }

func (e *committedDamage) Error() string { return e.issue.Error() }

// Unwrap returns the damage and ErrDamageNotTorn.
func (e *committedDamage) Unwrap() []error { return []error{e.issue, ErrDamageNotTorn} }

// damageError refuses a raw log whose damage is followed by a complete
// valid record: not a torn write, so not a tail a repair may cut unless
// forced.
type damageError struct {
	// issue is the first damage found.
	issue error
	// offset is the file offset where the damaged record starts.
	offset int64
	// line and validAt locate the first valid record after it.
	line, validAt int64
}

func (e *damageError) Error() string {
	return fmt.Sprintf("%v; the damage at byte %d is followed by a complete valid record at line %d (byte %d), so it is not a torn write",
		e.issue, e.offset, e.line, e.validAt)
}

// Unwrap returns the first damage found and ErrDamageNotTorn.
func (e *damageError) Unwrap() []error { return []error{e.issue, ErrDamageNotTorn} }

// ErrDamageNotTorn is matched (errors.Is) by the corruption error of a raw
// log whose damage is followed by complete valid records: a forced repair
// (CutOptions.Force) is the only way to cut it.
var ErrDamageNotTorn = errors.New("damage followed by complete valid records is not a torn write")

// lineChunk is the decoding of the complete lines that start in one
// stretch of a buffer.
type lineChunk struct {
	// events holds one event per line (for a failed line, whatever
	// DecodeEventLine returned with its error).
	events []session.Event
	// ends are the offsets in the buffer of the lines' newlines.
	ends []int
	// errs are the failures, in line order.
	errs []lineError
	// start is the offset in the buffer of the chunk's first line.
	start int
}

// lineError is the decoding failure of line (an index into a lineChunk).
type lineError struct {
	line int
	err  error
	// seq is what the harness's scan sees of a JSON line that is not a
	// valid event (probeSeq).
	seq seqProbe
}

// seqProbe is the seq member of a JSON line as the published harness's
// scan reads it (`event.seq !== events.length`): a number, something else,
// or a line that is JSON null, on which the harness's scan throws.
type seqProbe struct {
	number bool
	value  float64
	null   bool
}

// probeSeq reads the seq member of line, a JSON text that failed to decode
// as an event. A repeated key counts by its last value, as JSON.parse
// keeps it.
func probeSeq(line []byte) seqProbe {
	if bytes.Equal(bytes.TrimSpace(line), []byte("null")) {
		return seqProbe{null: true}
	}
	var v struct {
		Seq json.RawMessage `json:"seq"`
	}
	if json.Unmarshal(line, &v) != nil || len(v.Seq) == 0 {
		return seqProbe{}
	}
	f, err := strconv.ParseFloat(string(v.Seq), 64)
	if err != nil {
		return seqProbe{}
	}
	return seqProbe{number: true, value: f}
}

// decodeChunkBytes is the stretch of a buffer decoded as one unit of work.
// A chunk is small enough to stay in the CPU cache between finding its
// lines and decoding them. (A variable so tests can use many tiny chunks.)
var decodeChunkBytes = 512 << 10

// decodeChunks decodes every complete line of buf: the lines starting in
// each stretch of decodeChunkBytes form a chunk, and chunks are decoded on
// all available CPUs when there are several.
func decodeChunks(buf []byte) []lineChunk {
	n := (len(buf) + decodeChunkBytes - 1) / decodeChunkBytes
	chunks := make([]lineChunk, n)
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers < 2 {
		var d session.LineDecoder
		for i := range chunks {
			decodeChunk(&d, buf, i, &chunks[i])
		}
		return chunks
	}
	var next atomic.Int64
	work := func() {
		var d session.LineDecoder
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			decodeChunk(&d, buf, i, &chunks[i])
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return chunks
}

// chunkStart returns the offset of the first line of buf that starts at or
// after i*decodeChunkBytes, or len(buf).
func chunkStart(buf []byte, i int) int {
	if i == 0 {
		return 0
	}
	from := i*decodeChunkBytes - 1
	if from >= len(buf) {
		return len(buf)
	}
	nl := bytes.IndexByte(buf[from:], '\n')
	if nl < 0 {
		return len(buf)
	}
	return from + nl + 1
}

// decodeChunk decodes the complete lines that start in the i-th stretch of
// buf into c.
func decodeChunk(d *session.LineDecoder, buf []byte, i int, c *lineChunk) {
	decodeRange(d, buf, chunkStart(buf, i), chunkStart(buf, i+1), c)
}

// decodeRange decodes the complete lines of buf[start:end] into c; their
// offsets are those of buf.
func decodeRange(d *session.LineDecoder, buf []byte, start, end int, c *lineChunk) {
	c.start = start
	if start >= end {
		return
	}
	// The newlines first, in one pass that also brings the chunk into the
	// cache, then each line.
	c.ends = make([]int, 0, (end-start)/512+8)
	for pos := start; ; {
		nl := bytes.IndexByte(buf[pos:end], '\n')
		if nl < 0 {
			break
		}
		c.ends = append(c.ends, pos+nl)
		pos += nl + 1
	}
	c.events = make([]session.Event, len(c.ends))
	pos := start
	for k, nl := range c.ends {
		var err error
		c.events[k], err = d.Decode(buf[pos:nl])
		if err != nil {
			le := lineError{line: k, err: err}
			if !errors.Is(err, session.ErrUnparsable) {
				le.seq = probeSeq(buf[pos:nl])
			}
			c.errs = append(c.errs, le)
		}
		pos = nl + 1
	}
}

// scanRawDecoded validates a raw JSONL log (FORMAT.md §2.3, §4.3), with the
// event lines (after the header line) already decoded into chunks, or decoded
// here when chunks is nil. Damage
// followed by a complete valid record is refused unless force is set; then
// the first damage and everything after it form the suffix to cut, and
// forcedCut says whether that suffix holds more than a torn write leaves.
func scanRawDecoded(data []byte, chunks []lineChunk, force bool) (*scanResult, error) {
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return nil, errHeaderless
	}
	h, err := parseHeaderLine(data[:nl])
	if err != nil {
		return nil, err
	}
	base := int64(nl + 1)
	if chunks == nil {
		chunks = decodeChunks(data[base:])
	}
	sc := lineScanner{intactTail: true, force: force, base: base, harness: h.Version == wire.FormatVersionV0}
	n, err := sc.feedChunks(chunks)
	if err != nil {
		return nil, err
	}
	r := &scanResult{header: h, events: sc.events, committedBytes: base + n, tornTruncateTo: -1, size: int64(len(data)), forcedCut: sc.damaged}
	if r.committedBytes < r.size {
		r.tornTruncateTo = r.committedBytes
	}
	return r, nil
}

// scanZstd validates a Zstandard log (FORMAT.md §4.4).
func scanZstd(codec *zstdCodec, data []byte) (*scanResult, error) {
	frames, tornStart, err := scanZstdFrames(data)
	if err != nil {
		return nil, err
	}
	if len(frames) == 0 {
		return nil, errZstdHeaderless
	}
	headerPlain, err := codec.decodeFrame(data[frames[0].start:frames[0].end])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errZstdHeaderInvalid, err)
	}
	h, err := parseHeaderFrame(headerPlain)
	if err != nil {
		return nil, err
	}
	// Every batch frame holds whole lines, so the frames' plaintexts are
	// concatenated and scanned in one pass (decoded in parallel when large).
	plain := make([]byte, 0, plaintextSize(data, frames[1:]))
	for _, f := range frames[1:] {
		n := len(plain)
		plain, err = codec.appendDecodedFrame(plain, data[f.start:f.end])
		if err != nil {
			return nil, fmt.Errorf("corrupt Zstandard session log: frame at byte %d failed validation: %w", f.start, err)
		}
		if len(plain) > n && plain[len(plain)-1] != '\n' {
			return nil, errZstdTornRecord
		}
	}
	sc := lineScanner{strict: true}
	n, err := sc.feed(plain)
	if err != nil {
		return nil, err
	}
	if n != int64(len(plain)) {
		return nil, errZstdTornRecord
	}
	r := &scanResult{header: h, events: sc.events, committedBytes: frames[len(frames)-1].end, tornTruncateTo: -1, size: int64(len(data))}
	if tornStart >= 0 {
		r.tornTruncateTo = tornStart
		if partial := codec.recoverTornFrame(data[tornStart:]); len(partial) > 0 {
			tail := lineScanner{line: sc.line, events: sc.events}
			if _, err := tail.feed(partial); err == nil {
				r.recovered = tail.events[len(sc.events):len(tail.events):len(tail.events)]
			}
		}
	}
	return r, nil
}

// parseHeaderFrame checks that a header frame's plaintext is exactly one
// newline-terminated line and parses it.
func parseHeaderFrame(plain []byte) (wire.Header, error) {
	if len(plain) == 0 || bytes.IndexByte(plain, '\n') != len(plain)-1 {
		return wire.Header{}, errZstdHeaderFrame
	}
	return parseHeaderLine(plain[:len(plain)-1])
}

// plaintextSize is the total content size the frames declare (frames this
// store writes always declare it), bounded by zstdMaxFrameContent each, so
// the plaintext is allocated once.
func plaintextSize(data []byte, frames []frameSpan) int {
	total := 0
	for _, f := range frames {
		h, complete, err := parseZstdFrameHeader(data[f.start:f.end], 0)
		if err != nil || !complete || !h.hasContentSize || h.contentSize > zstdMaxFrameContent {
			return total + 4*int(f.end-f.start)
		}
		total += int(h.contentSize)
	}
	return total
}

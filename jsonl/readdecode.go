package jsonl

import (
	"bytes"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/sessionflow/sessionflow/session"
)

// pipelineMinBytes is the size from which a raw log's event lines are
// decoded while the rest of the file is still being read. Smaller logs are
// read with one read call, as readFile reads. (Variables so tests can
// pipeline small files in tiny pieces.)
var pipelineMinBytes int64 = 8 << 20

// readPieceBytes is the size of each read of a log decoded while it is read.
var readPieceBytes = 4 << 20

// readRawDecoding reads a raw log as readFile does and, for a large log on
// more than one CPU, decodes its event lines while the rest of the file is
// read. chunks is then the decoding of the lines after the first line, as
// decodeChunks(data[nl+1:]) returns it (nl being the first newline of data);
// it is nil when the log was only read, and the caller decodes it. Reading
// always runs to the end of the file, and a read error is returned as from
// readFile, whatever the lines decoded so far hold.
func (s *Store) readRawDecoding(path string) (data []byte, chunks []lineChunk, err error) {
	f, buf, err := s.openSized(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	workers := runtime.GOMAXPROCS(0)
	if int64(cap(buf)-readSlack) < pipelineMinBytes || workers < 2 {
		data, err := readRest(f, buf)
		return data, nil, err
	}
	p := &readPipeline{buf: buf[:cap(buf)], base: -1}
	p.cond.L = &p.mu
	for range workers - 1 {
		p.wg.Go(p.work)
	}
	for {
		if len(buf) == cap(buf) {
			// The file grew since its stat: read the rest the usual way,
			// which moves the bytes to a larger buffer, and decode it all
			// afterwards.
			p.stop(true)
			data, err := readRest(f, buf)
			return data, nil, err
		}
		n, err := f.Read(buf[len(buf):min(len(buf)+readPieceBytes, cap(buf))])
		buf = buf[:len(buf)+n]
		p.publish(len(buf))
		if err == io.EOF {
			break
		}
		if err != nil {
			p.stop(true)
			return nil, nil, err
		}
	}
	p.stop(false)
	p.work()
	p.wg.Wait()
	return buf, p.chunks, nil
}

// readRest reads f to its end into buf (after its current length), growing
// buf when the file holds more than its capacity.
func readRest(f File, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readPipeline hands the chunks of a buffer that is being filled from the
// front to decoding goroutines, each chunk as soon as its lines are all in.
// Chunks are those of decodeChunks over the event lines, which start after
// the buffer's first newline.
type readPipeline struct {
	// buf is the whole buffer; only buf[:avail] has been read.
	buf []byte
	wg  sync.WaitGroup
	// next is the index of the next chunk to claim.
	next atomic.Int64

	mu   sync.Mutex
	cond sync.Cond
	// avail is the number of bytes read so far.
	avail int
	// done is set once avail is final; aborted when the decoding is no
	// longer wanted.
	done, aborted bool
	// base is the offset of the event lines, or -1 until the first newline
	// has been read.
	base int
	// chunks are the decoded chunks, allocated once base is known.
	chunks []lineChunk
}

// publish records that buf[:avail] has been read.
func (p *readPipeline) publish(avail int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.base < 0 {
		if nl := bytes.IndexByte(p.buf[p.avail:avail], '\n'); nl >= 0 {
			p.base = p.avail + nl + 1
			// Enough chunks for a full buffer; decoding stops at the end of
			// what was read.
			p.chunks = make([]lineChunk, (len(p.buf)-p.base)/decodeChunkBytes+2)
		}
	}
	p.avail = avail
	p.cond.Broadcast()
}

// stop records that no more bytes will arrive and, when abort is set, that
// the decoding is abandoned (it waits for the decoding goroutines then).
func (p *readPipeline) stop(abort bool) {
	p.mu.Lock()
	p.done = true
	p.aborted = p.aborted || abort
	p.cond.Broadcast()
	p.mu.Unlock()
	if abort {
		p.wg.Wait()
	}
}

// work decodes chunks until there are none left.
func (p *readPipeline) work() {
	var d session.LineDecoder
	for {
		i := int(p.next.Add(1) - 1)
		region, start, end, ok := p.claim(i)
		if !ok {
			return
		}
		decodeRange(&d, region, start, end, &p.chunks[i])
	}
}

// claim waits until the lines of chunk i have been read and returns the
// event-line region read so far and the chunk's bounds in it; ok is false
// when there is no such chunk or the decoding was abandoned.
func (p *readPipeline) claim(i int) (region []byte, start, end int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.aborted {
		if p.base >= 0 {
			region := p.buf[p.base:p.avail]
			start, sok := readChunkStart(region, i, p.done)
			end, eok := readChunkStart(region, i+1, p.done)
			if sok && eok {
				if (p.done && start >= len(region)) || i >= len(p.chunks) {
					return nil, 0, 0, false
				}
				return region, start, end, true
			}
		} else if p.done {
			return nil, 0, 0, false
		}
		p.cond.Wait()
	}
	return nil, 0, 0, false
}

// readChunkStart is chunkStart over the part of the event lines read so
// far: ok is false when it depends on bytes not yet read (complete tells
// that there are none).
func readChunkStart(region []byte, i int, complete bool) (int, bool) {
	if complete || i == 0 {
		return chunkStart(region, i), true
	}
	from := i*decodeChunkBytes - 1
	if from >= len(region) {
		return 0, false
	}
	nl := bytes.IndexByte(region[from:], '\n')
	if nl < 0 {
		return 0, false
	}
	return from + nl + 1, true
}

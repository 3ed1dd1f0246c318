package livetext

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// One inotify instance serves every follower of the process: the kernel
// allows a user few instances (fs.inotify.max_user_instances, 128 by
// default) but many watches, and a server follows many sessions at once.

// watchMask is what a follower is woken for in a session directory: a
// live file created, written, removed or renamed, or the directory itself
// removed or moved away (a deleted session).
const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW

// structuralMask are the events after which a follower reads the directory
// again (a file came or went); after the others it reads the file it
// follows.
const structuralMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_IGNORED | unix.IN_Q_OVERFLOW

// notifier is the process's inotify instance.
type notifier struct {
	fd   int
	file *os.File

	mu      sync.Mutex
	watches map[int32]map[*subscription]struct{}
	broken  bool // the read loop stopped: subscribers poll
}

// subscription wakes one follower for the changes of one directory.
type subscription struct {
	n  *notifier
	wd int32
	// c is signalled (never blocking) after a change.
	c chan struct{}
	// structural is set when the change may have added or removed a file.
	structural atomic.Bool
}

var (
	notifyOnce sync.Once
	notifyHub  *notifier
	notifyErr  error
)

// sharedNotifier returns the process's inotify instance, made at first use.
func sharedNotifier() (*notifier, error) {
	notifyOnce.Do(func() {
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
		if err != nil {
			notifyErr = fmt.Errorf("livetext: inotify: %w", err)
			return
		}
		// A non-blocking descriptor makes a pollable *os.File: Read waits
		// in the runtime's poller, not in a thread.
		n := &notifier{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), watches: map[int32]map[*subscription]struct{}{}}
		notifyHub = n
		go n.run()
	})
	return notifyHub, notifyErr
}

// subscribe watches dir; the caller must close the subscription.
func (n *notifier) subscribe(dir string) (*subscription, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.broken {
		return nil, errors.New("livetext: the inotify reader stopped")
	}
	wd, err := unix.InotifyAddWatch(n.fd, dir, watchMask)
	if err != nil {
		return nil, fmt.Errorf("livetext: watch %s: %w", dir, &os.PathError{Op: "inotify_add_watch", Path: dir, Err: err})
	}
	s := &subscription{n: n, wd: int32(wd), c: make(chan struct{}, 1)}
	subs := n.watches[s.wd]
	if subs == nil {
		subs = map[*subscription]struct{}{}
		n.watches[s.wd] = subs
	}
	subs[s] = struct{}{}
	return s, nil
}

// close ends the subscription; the directory's watch is removed with its
// last subscription.
func (s *subscription) close() {
	n := s.n
	n.mu.Lock()
	defer n.mu.Unlock()
	subs, ok := n.watches[s.wd]
	if _, mine := subs[s]; !ok || !mine {
		return // the kernel removed the watch (IN_IGNORED)
	}
	delete(subs, s)
	if len(subs) == 0 {
		delete(n.watches, s.wd)
		_, _ = unix.InotifyRmWatch(n.fd, uint32(s.wd))
	}
}

// wake signals s.
func (s *subscription) wake(structural bool) {
	if structural {
		s.structural.Store(true)
	}
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// run reads the inotify events and wakes the subscribers of their
// directories. A failed read (never expected) stops it: every subscriber is
// woken and the followers fall back to polling.
func (n *notifier) run() {
	buf := make([]byte, 256*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		k, err := n.file.Read(buf)
		if err != nil {
			n.mu.Lock()
			n.broken = true
			for _, subs := range n.watches {
				for s := range subs {
					s.wake(true)
				}
			}
			n.mu.Unlock()
			return
		}
		n.dispatch(buf[:k])
	}
}

// dispatch wakes the subscribers of the events in b.
func (n *notifier) dispatch(b []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		size := int(binary.NativeEndian.Uint32(b[12:16]))
		if unix.SizeofInotifyEvent+size > len(b) {
			return
		}
		name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+size]), "\x00")
		b = b[unix.SizeofInotifyEvent+size:]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			for _, subs := range n.watches {
				for s := range subs {
					s.wake(true)
				}
			}
			continue
		}
		subs := n.watches[wd]
		if name != "" && !strings.HasPrefix(name, filePrefix) {
			continue // the log, the lease, the summary
		}
		structural := mask&structuralMask != 0
		for s := range subs {
			s.wake(structural)
		}
		if mask&unix.IN_IGNORED != 0 {
			delete(n.watches, wd)
		}
	}
}

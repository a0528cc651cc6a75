//go:build linux

package wire

import (
	"context"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// rawConn is a Unix stream socket worked with system calls, for a process
// that makes one call and exits (bin/ipc). The socket is non-blocking;
// a read or write that would block waits in ppoll(2) for the socket, up
// to its deadline, in the calling goroutine's thread. Nothing registers
// with the runtime's network poller, so none of its set-up (an epoll
// instance, an eventfd, a registration per socket, a thread to wait in
// epoll) is paid.
//
// Deadlines are those of a net.Conn, except that setting one does not
// wake a wait already begun: Close does (shutdown(2) wakes the ppoll).
type rawConn struct {
	mu     sync.Mutex
	fd     int
	users  int  // Read and Write calls in progress
	closed bool // Close was called; the last user closes fd
	rdl    time.Time
	wdl    time.Time
	alarm  *Alarm // rung by wait
}

// pollFd is struct pollfd of poll(2).
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const (
	pollIn  = 0x1 // POLLIN
	pollOut = 0x4 // POLLOUT
)

// dialUnix connects a non-blocking Unix stream socket to path. A listener
// whose backlog is full refuses at once (EAGAIN), as package net's dial
// does; the caller retries.
func dialUnix(ctx context.Context, path string, deadline time.Time, alarm *Alarm) (conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, withContext("dial unix "+path, err)
	}
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, withContext("dial unix "+path, os.NewSyscallError("socket", err))
	}
	c := &rawConn{fd: fd, rdl: deadline, wdl: deadline, alarm: alarm}
	if err := c.connect(path); err != nil {
		syscall.Close(fd)
		return nil, withContext("dial unix "+path, err)
	}
	return c, nil
}

func (c *rawConn) connect(path string) error {
	switch err := syscall.Connect(c.fd, &syscall.SockaddrUnix{Name: path}); err {
	case nil:
		return nil
	case syscall.EINPROGRESS, syscall.EALREADY, syscall.EINTR:
		// Not seen on a Unix socket, which connects or refuses at once;
		// handled as package net does for any socket.
		if err := c.wait(pollOut, c.wdl); err != nil {
			return err
		}
		soerr, err := syscall.GetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_ERROR)
		if err != nil {
			return os.NewSyscallError("getsockopt", err)
		}
		if soerr != 0 {
			return os.NewSyscallError("connect", syscall.Errno(soerr))
		}
		return nil
	default:
		return os.NewSyscallError("connect", err)
	}
}

// acquire marks a Read or Write in progress, so that Close leaves the fd
// open (and its number not reused) until it ends; it returns the deadline
// of that direction.
func (c *rawConn) acquire(write bool) (time.Time, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return time.Time{}, os.ErrClosed
	}
	c.users++
	if write {
		return c.wdl, nil
	}
	return c.rdl, nil
}

func (c *rawConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
	if c.closed && c.users == 0 {
		syscall.Close(c.fd)
	}
}

func (c *rawConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Read reads what the socket has, waiting for it until the read deadline.
// A closed peer is io.EOF; a passed deadline os.ErrDeadlineExceeded; a
// Close, os.ErrClosed.
func (c *rawConn) Read(b []byte) (int, error) {
	dl, err := c.acquire(false)
	if err != nil {
		return 0, err
	}
	defer c.release()
	if !dl.IsZero() && !time.Now().Before(dl) {
		return 0, os.ErrDeadlineExceeded
	}
	for {
		n, err := syscall.Read(c.fd, b)
		switch {
		case err == nil && n == 0 && len(b) > 0:
			if c.isClosed() {
				return 0, os.ErrClosed
			}
			return 0, io.EOF
		case err == nil:
			return n, nil
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			if err := c.wait(pollIn, dl); err != nil {
				return 0, err
			}
			if c.isClosed() {
				return 0, os.ErrClosed
			}
		default:
			return 0, os.NewSyscallError("read", err)
		}
	}
}

// Write writes all of b, waiting for room until the write deadline. It
// sends with MSG_NOSIGNAL: a peer gone is EPIPE, never a SIGPIPE.
func (c *rawConn) Write(b []byte) (int, error) {
	dl, err := c.acquire(true)
	if err != nil {
		return 0, err
	}
	defer c.release()
	if !dl.IsZero() && !time.Now().Before(dl) {
		return 0, os.ErrDeadlineExceeded
	}
	n := 0
	for n < len(b) {
		m, err := syscall.SendmsgN(c.fd, b[n:], nil, nil, syscall.MSG_NOSIGNAL)
		if m > 0 {
			n += m
		}
		switch {
		case err == nil, err == syscall.EINTR:
		case err == syscall.EAGAIN:
			if err := c.wait(pollOut, dl); err != nil {
				return n, err
			}
			if c.isClosed() {
				return n, os.ErrClosed
			}
		default:
			return n, os.NewSyscallError("write", err)
		}
	}
	return n, nil
}

// wait blocks in ppoll until the socket is ready for events (or has hung
// up, or has an error: the next read or write says which) or the deadline
// passes. When the alarm's time comes first, it rings the alarm and goes
// on waiting.
func (c *rawConn) wait(events int16, deadline time.Time) error {
	for {
		now := time.Now()
		limit := deadline
		if at, ok := c.alarm.pending(); ok {
			if !now.Before(at) {
				c.alarm.Ring()
				continue
			}
			if limit.IsZero() || at.Before(limit) {
				limit = at
			}
		}
		var ts *syscall.Timespec
		if !limit.IsZero() {
			d := limit.Sub(now)
			if d <= 0 {
				return os.ErrDeadlineExceeded
			}
			t := syscall.NsecToTimespec(int64(d))
			ts = &t
		}
		p := pollFd{fd: int32(c.fd), events: events}
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		switch {
		case e == syscall.EINTR, e == 0 && n == 0: // a signal, or the time limit: look at the clock again
		case e != 0:
			return os.NewSyscallError("ppoll", e)
		default:
			return nil
		}
	}
}

// SetDeadline sets both deadlines; the zero time means none.
func (c *rawConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return os.ErrClosed
	}
	c.rdl, c.wdl = t, t
	return nil
}

// SetReadDeadline bounds the Reads that begin after it.
func (c *rawConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return os.ErrClosed
	}
	c.rdl = t
	return nil
}

// SetWriteDeadline bounds the Writes that begin after it.
func (c *rawConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return os.ErrClosed
	}
	c.wdl = t
	return nil
}

// Close closes the socket. It may be called while another goroutine reads
// or writes: that call is woken (shutdown(2)) and fails with os.ErrClosed,
// and the descriptor is closed when it has returned.
func (c *rawConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return os.ErrClosed
	}
	c.closed = true
	if c.users > 0 {
		return os.NewSyscallError("shutdown", syscall.Shutdown(c.fd, syscall.SHUT_RDWR))
	}
	return os.NewSyscallError("close", syscall.Close(c.fd))
}

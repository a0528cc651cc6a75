//go:build unix

package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// egressDial sends req with one end of a new stream socket pair on the
// egress socket fd, and reads the core's answer on the other end.
func egressDial(ctx context.Context, fd int, req []byte) (net.Conn, error) {
	pair, err := streamPair()
	if err != nil {
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	ours := os.NewFile(uintptr(pair[0]), "egress")
	err = sendRequest(ctx, fd, req, pair[1])
	unix.Close(pair[1]) // the core holds its copy now
	if err != nil {
		ours.Close()
		return nil, err
	}
	c, err := net.FileConn(ours)
	ours.Close()
	if err != nil {
		return nil, fmt.Errorf("egress stream: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok { // cannot happen: a Unix socket pair
		c.Close()
		return nil, fmt.Errorf("egress stream is a %T", c)
	}
	conn, err := readReply(ctx, uc)
	if err != nil {
		uc.Close()
		return nil, err
	}
	return conn, nil
}

// sendRequest sends req with theirs attached as one message, without
// blocking: while the core's queue is full it retries, until ctx ends.
func sendRequest(ctx context.Context, fd int, req []byte, theirs int) error {
	rights := unix.UnixRights(theirs)
	wait := time.Millisecond
	for {
		err := unix.Sendmsg(fd, req, rights, nil, sendFlags)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN), errors.Is(err, unix.ENOBUFS):
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			wait = min(2*wait, 100*time.Millisecond)
		case errors.Is(err, unix.EBADF), errors.Is(err, unix.ENOTSOCK):
			return fmt.Errorf("%w (descriptor %d is not the egress socket: %v)", ErrNoEgress, fd, err)
		default:
			return fmt.Errorf("sending the request to the egress point: %w", err)
		}
	}
}

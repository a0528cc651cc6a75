package wire

import (
	"bufio"
	"context"
	"io"
	"time"
)

// Dealer is one connection of a ZMTP DEALER to a ROUTER on a Unix socket,
// used synchronously: Send a message, Recv what comes back. It starts no
// goroutine. It is not safe for concurrent use, but Close may be called
// from another goroutine to interrupt a Recv. A deadline bounds the Recv
// that begins after it is set.
//
// On Linux it works the socket with plain system calls (conn_linux.go),
// not through package net: the runtime's network poller — its epoll
// instance, its registrations and the thread that waits in it — was a
// quarter of what an ipc run cost beyond the call itself. Elsewhere it
// uses net.
type Dealer struct {
	conn conn
	br   *bufio.Reader
	cnt  Counter
	wbuf []byte
}

// conn is what a Dealer needs of its connection: a net.Conn's reading,
// writing, deadlines and Close, which dialUnix provides per platform.
type conn interface {
	io.ReadWriteCloser
	SetDeadline(t time.Time) error
	SetReadDeadline(t time.Time) error
	SetWriteDeadline(t time.Time) error
}

// Dial connects to the ROUTER listening on the Unix socket at path and
// completes the handshake before deadline. It writes its greeting and a
// READY at once (with the NULL mechanism neither side waits for the other
// before its READY) and, when first is not nil, first as a one-part
// message in the same write — the peer reads it once the handshake is
// done, and a client that sends one request saves a round trip. Then it
// reads the peer's greeting and READY, which must pass CheckGreeting and
// ParseReady and say ROUTER. Frames after the handshake are held to lim
// (zero fields: the defaults).
func Dial(ctx context.Context, path string, deadline time.Time, lim Limits, first []byte) (*Dealer, error) {
	return DialAlarm(ctx, path, deadline, lim, first, nil)
}

// DialAlarm is Dial with an alarm (nil: none) that rings, when its time
// comes, while the Dealer waits: in the handshake, a Send or a Recv.
func DialAlarm(ctx context.Context, path string, deadline time.Time, lim Limits, first []byte, alarm *Alarm) (*Dealer, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	conn, err := dialUnix(ctx, path, deadline, alarm)
	if err != nil {
		return nil, err
	}
	dl, err := handshake(conn, deadline, lim, first)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return dl, nil
}

func handshake(conn conn, deadline time.Time, lim Limits, first []byte) (*Dealer, error) {
	if err := conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	hello := make([]byte, 0, GreetingLen+32+9+len(first))
	hello = append(hello, Greeting[:]...)
	hello = append(hello, EncodeReady("DEALER")...)
	if first != nil {
		hello = AppendFrame(hello, first)
	}
	if _, err := conn.Write(hello); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(connReader{conn}, 4096)
	var g [GreetingLen]byte
	if _, err := io.ReadFull(br, g[:]); err != nil {
		return nil, withContext("read the greeting", err)
	}
	if err := CheckGreeting(&g); err != nil {
		return nil, err
	}
	st, err := ReadReady(br)
	if err != nil {
		return nil, withContext("read the READY", err)
	}
	if st != "ROUTER" {
		return nil, withDetail(ErrSocketType, "the peer is a "+st+", not a ROUTER")
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return &Dealer{conn: conn, br: br, cnt: Counter{Limits: lim.WithDefaults()}}, nil
}

// Send writes body as a one-part message, whole, before deadline.
func (d *Dealer) Send(body []byte, deadline time.Time) error {
	if err := d.conn.SetWriteDeadline(deadline); err != nil {
		return err
	}
	d.wbuf = AppendFrame(d.wbuf[:0], body)
	_, err := d.conn.Write(d.wbuf)
	return err
}

// Recv reads the next message and returns its last frame (a ROUTER's
// answer to a DEALER carries no envelope; a multi-part one ends with the
// payload). Commands between messages (PING and the like) are skipped.
// Every header is checked against the limits before its body is read. It
// waits until the read deadline (SetReadDeadline); a clean close between
// messages is io.EOF.
func (d *Dealer) Recv() ([]byte, error) {
	for {
		flags, err := d.br.ReadByte()
		if err != nil {
			return nil, err
		}
		size, err := ReadSize(d.br, flags)
		if err != nil {
			return nil, unexpected(err)
		}
		if err := d.cnt.Check(flags, size); err != nil {
			return nil, err
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(d.br, body); err != nil {
			return nil, unexpected(err)
		}
		if flags&(FlagCommand|FlagMore) == 0 {
			return body, nil
		}
	}
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// SetReadDeadline bounds the next Recv.
func (d *Dealer) SetReadDeadline(t time.Time) error { return d.conn.SetReadDeadline(t) }

// Close closes the connection.
func (d *Dealer) Close() error { return d.conn.Close() }

// connReader is a conn as an io.Reader of a concrete type, which
// bufio.NewReaderSize takes through an interface table built at compile
// time: passing the conn itself converts one interface to another at run
// time (runtime.getitab), whose first lookup touches pages of the table
// no other part of bin/ipc does.
type connReader struct{ c conn }

func (r connReader) Read(p []byte) (int, error) { return r.c.Read(p) }

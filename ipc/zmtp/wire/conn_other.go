//go:build !linux

package wire

import (
	"context"
	"net"
	"time"
)

// dialUnix connects to the Unix socket at path through package net; a
// timer rings the alarm, if any, and is stopped by Close.
func dialUnix(ctx context.Context, path string, deadline time.Time, alarm *Alarm) (conn, error) {
	d := net.Dialer{Deadline: deadline}
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	at, ok := alarm.pending()
	if !ok {
		return c, nil
	}
	return &alarmConn{Conn: c, timer: time.AfterFunc(time.Until(at), alarm.Ring)}, nil
}

// alarmConn is a net.Conn whose Close also stops its alarm's timer.
type alarmConn struct {
	net.Conn
	timer *time.Timer
}

func (c *alarmConn) Close() error {
	c.timer.Stop()
	return c.Conn.Close()
}

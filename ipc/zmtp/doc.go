// Package zmtp is a hardened zmq4 transport for Unix sockets.
package zmtp

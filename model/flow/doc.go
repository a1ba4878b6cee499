// Package flow orders the requests the gateway holds back while every
// replica of their model is full: a bounded queue, first in first out, or
// round-robin across keys (conversations) so that one tenant's burst
// cannot starve the others.
//
// flow is pure: it starts no goroutines, does no I/O and keeps no globals.
// transport/frontend owns a Queue per model under its own lock and does the
// waiting.
package flow

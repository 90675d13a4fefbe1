// Package emutest helps the tests of the sandbox's emulated providers: a
// Receiver that collects what a provider POSTs back (status callbacks,
// webhook events).
package emutest

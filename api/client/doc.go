// Package client calls effectd's admin API: the command line uses it over
// the network, and the console in process. Errors the API answers are
// *Error, with the API's code and message. Its types are effectdtype's, the
// very ones the API answers; it imports neither the API nor the dispatcher.
package client

// Command effectd sends external side effects effectively once.
//
//	effectd migrate   [--config FILE]                 apply the schema; register channels
//	effectd serve     [--config FILE] [--migrate]      dispatcher, reconciler, pruner, admin API
//	effectd sandbox   [--addr 127.0.0.1:9090]          loopback emulator of Stripe, Twilio, webhooks
//	effectd dev       [--data .data]                   all of the above on a throwaway local PostgreSQL
//	effectd version
//
// Every command exits 0 on success, 1 on a runtime failure and 2 on bad usage.
package main

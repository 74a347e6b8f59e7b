/**
 * The longest delay a Node timer holds: 2^31 − 1 ms, about 24.8 days. A longer one does not wait
 * longer: Node prints a TimeoutOverflowWarning and fires it after 1 ms. Every duration exarch
 * takes from a person or a host, and turns into a timer, is checked against it.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** The same in whole seconds (2,147,483), for flags given in seconds. */
export const MAX_TIMER_SECONDS = Math.floor(MAX_TIMER_MS / 1000);

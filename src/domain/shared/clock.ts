/** The time the domain reads: injected so tests can freeze or move it. */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();

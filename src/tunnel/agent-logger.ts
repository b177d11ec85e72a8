/** What the agent and its tunnel streams log through (a pino logger fits; `agent-command.ts` writes JSON lines to stderr). */
export interface AgentLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

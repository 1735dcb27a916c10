// The service's name, as people see it: the API document's title, and the
// name the OAuth consent page asks the user to grant access to (both
// processes show it, so it lives here).
export const SERVICE_NAME = 'Community, Events, Networking and Task Platform';

namespace Demo;

public sealed class Greeter
{
    // TODO: localise the greeting.
    public string Greet(string name) => $"Hello, {name}!";
}

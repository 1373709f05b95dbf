// A one-off maintenance script; it belongs to no project and no build compiles it.
namespace Calc.Scripts;

public static class Tool
{
    public static int Main(string[] args)
    {
        System.Console.WriteLine(string.Join(",", args));
        return 0;
    }
}
